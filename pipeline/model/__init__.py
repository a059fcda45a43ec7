"""The science: numbers in, numbers out; no file I/O."""

"""Readers of the raw inputs in DATA_DIR. The only modules of the pipeline that open input files."""

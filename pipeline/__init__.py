"""Batch pipeline: reads the raw data, computes every response, renders a release."""

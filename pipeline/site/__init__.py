"""The documentation site, OpenAPI document and figures shipped inside every release."""

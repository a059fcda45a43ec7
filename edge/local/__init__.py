"""The local development server: never part of the Lambda@Edge bundle (deploy/build_bundle.py)."""

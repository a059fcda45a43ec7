"""Publishing releases to S3: immutable release prefixes plus one small mutable pointer.

`s3` holds the logic as plain functions over a boto3 client (so tests drive it
against a real server); `cli` wraps them in click commands for `malaria-risk`.
"""

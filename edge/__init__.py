"""The edge: route table, request gate, key stores and servers. Standard library only (plus boto3 for DynamoDB)."""

"""A Lambda function and its role, as both deploys make them: the edge's two functions (aws.py) and
the dashboard's one (dashboard.py). Each is described first and changed only where it differs."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from deploy.common import log


def _document(doc: Any) -> Any:
    """A policy document as IAM returns it (JSON text or already parsed), parsed."""
    return json.loads(doc) if isinstance(doc, str) else doc


def step_role(iam: Any, name: str, trust: dict[str, Any], policy_name: str, policy: dict[str, Any],
              description: str) -> str:
    """`<name>-role` with this trust policy and this one inline policy: its ARN."""
    role = f"{name}-role"
    try:
        found = iam.get_role(RoleName=role)["Role"]
    except iam.exceptions.NoSuchEntityException:
        found = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust),
                                Description=description)["Role"]
        log(f"role {role}: created")
    else:
        if _document(found.get("AssumeRolePolicyDocument")) != trust:
            iam.update_assume_role_policy(RoleName=role, PolicyDocument=json.dumps(trust))
            log(f"role {role}: trust policy updated")
    try:
        same = _document(iam.get_role_policy(RoleName=role, PolicyName=policy_name)["PolicyDocument"]) == policy
    except iam.exceptions.NoSuchEntityException:
        same = False
    if not same:
        iam.put_role_policy(RoleName=role, PolicyName=policy_name, PolicyDocument=json.dumps(policy))
        log(f"role {role}: permissions set")
    return str(found["Arn"])


def code_sha256(code: bytes) -> str:
    """The digest Lambda reports as CodeSha256."""
    return base64.b64encode(hashlib.sha256(code).digest()).decode()


def wait(lam: Any, waiter: str, fname: str) -> None:
    lam.get_waiter(waiter).wait(FunctionName=fname, WaiterConfig={"Delay": 2, "MaxAttempts": 150})


def function_config(lam: Any, fname: str) -> dict[str, Any] | None:
    """The function's configuration, or None when there is no such function."""
    try:
        return dict(lam.get_function(FunctionName=fname)["Configuration"])
    except lam.exceptions.ResourceNotFoundException:
        return None


def step_function_code(lam: Any, fname: str, code: bytes, wanted: dict[str, Any], description: str,
                       variables: dict[str, str] | None = None, config: dict[str, Any] | None = None) -> None:
    """The function created, or its code and its configuration (`wanted`, and the environment
    `variables` when given) brought up to date. `config` is what `function_config` found, if the
    caller already read it."""
    config = config if config is not None else function_config(lam, fname)
    env = {} if variables is None else {"Environment": {"Variables": variables}}
    if config is None:
        lam.create_function(FunctionName=fname, Code={"ZipFile": code}, Description=description, **env, **wanted)
        wait(lam, "function_active_v2", fname)
        log(f"{fname}: created")
        return
    if config.get("CodeSha256") != code_sha256(code):
        lam.update_function_code(FunctionName=fname, ZipFile=code)
        wait(lam, "function_updated_v2", fname)
        log(f"{fname}: code updated")
    current_env = config.get("Environment", {}).get("Variables", {})
    if any(config.get(k) != v for k, v in wanted.items()) or (variables is not None and current_env != variables):
        lam.update_function_configuration(FunctionName=fname, **env, **wanted)
        wait(lam, "function_updated_v2", fname)
        log(f"{fname}: configuration updated")

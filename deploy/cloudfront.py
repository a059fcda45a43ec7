"""One CloudFront distribution brought to a wanted shape: the API's (aws.py) and the dashboard's
(dashboard.py) are both made here, so both find, create and update a distribution the same way."""

from __future__ import annotations

import time
from typing import Any

from deploy.common import log, subset

# settings of a behaviour made before cache policies; CloudFront refuses them beside a policy
LEGACY_BEHAVIOUR_FIELDS = ("ForwardedValues", "MinTTL", "DefaultTTL", "MaxTTL")


def find_distribution(cf: Any, comment: str) -> dict[str, Any] | None:
    """The distribution whose Comment is ours (the last one listed, if several)."""
    found = None
    for item in cf.list_distributions().get("DistributionList", {}).get("Items", []) or []:
        if item.get("Comment") == comment:
            found = item
    return found


def _quantity(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Quantity": len(items), "Items": items}


def is_current(config: dict[str, Any], origins: list[dict[str, Any]], behaviour: dict[str, Any],
               cache_behaviours: list[dict[str, Any]] | None, web_acl: str | None) -> bool:
    """Whether a found distribution's config already has every value we set."""
    current = {o["Id"]: o for o in config["Origins"].get("Items", []) or []}
    return (subset(behaviour, config["DefaultCacheBehavior"])
            and all(subset(o, current.get(o["Id"])) for o in origins)
            and (cache_behaviours is None or subset(_quantity(cache_behaviours), config.get("CacheBehaviors")))
            and (web_acl is None or config.get("WebACLId", "") == web_acl))


def updated_config(config: dict[str, Any], origins: list[dict[str, Any]], behaviour: dict[str, Any],
                   cache_behaviours: list[dict[str, Any]] | None, web_acl: str | None) -> dict[str, Any]:
    """The found config with our values laid over it: origins of others and fields we do not set are kept."""
    current = {o["Id"]: o for o in config["Origins"].get("Items", []) or []}
    for o in origins:
        current[o["Id"]] = {**current.get(o["Id"], {}), **o}
    default = {k: v for k, v in config["DefaultCacheBehavior"].items() if k not in LEGACY_BEHAVIOUR_FIELDS}
    out = {**config, "Origins": _quantity(list(current.values())), "DefaultCacheBehavior": {**default, **behaviour}}
    if cache_behaviours is not None:
        out["CacheBehaviors"] = _quantity(cache_behaviours)
    if web_acl is not None:
        out["WebACLId"] = web_acl
    return out


def step_distribution(cf: Any, name: str, comment: str, origins: list[dict[str, Any]], behaviour: dict[str, Any],
                      cache_behaviours: list[dict[str, Any]] | None = None,
                      web_acl: str | None = None) -> tuple[str, str, str]:
    """The distribution (found by its Comment), created or brought to the wanted shape: (id, ARN, domain).

    `cache_behaviours` None leaves the found ones alone; `web_acl` (a WAF web ACL's ARN) None leaves
    the found association alone."""
    found = find_distribution(cf, comment)
    if found is None:
        config: dict[str, Any] = {
            "CallerReference": f"{name}-{int(time.time())}", "Comment": comment, "Enabled": True,
            "Origins": _quantity(origins), "DefaultCacheBehavior": behaviour,
            "PriceClass": "PriceClass_All", "HttpVersion": "http2and3", "IsIPV6Enabled": True,
        }
        if cache_behaviours is not None:
            config["CacheBehaviors"] = _quantity(cache_behaviours)
        if web_acl is not None:
            config["WebACLId"] = web_acl
        created = cf.create_distribution(DistributionConfig=config)["Distribution"]
        log(f"distribution {created['Id']}: created ({created['DomainName']})")
        return str(created["Id"]), str(created["ARN"]), str(created["DomainName"])
    got = cf.get_distribution_config(Id=found["Id"])
    if not is_current(got["DistributionConfig"], origins, behaviour, cache_behaviours, web_acl):
        cf.update_distribution(Id=found["Id"], IfMatch=got["ETag"], DistributionConfig=updated_config(
            got["DistributionConfig"], origins, behaviour, cache_behaviours, web_acl))
        log(f"distribution {found['Id']}: updated")
    return str(found["Id"]), str(found["ARN"]), str(found["DomainName"])

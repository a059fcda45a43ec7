"""Client of the malaria risk data service for Nigeria (see README.md)."""

from ._client import Client
from ._errors import ApiError, ChecksumError, ClientError, MissingDependency, RateLimited
from ._project import dhis2_counts, project_counts

__all__ = ["ApiError", "ChecksumError", "Client", "ClientError", "MissingDependency", "RateLimited", "dhis2_counts", "project_counts"]
__version__ = "0.1.0"

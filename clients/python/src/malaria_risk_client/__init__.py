"""Client of the malaria risk data service for Nigeria (see README.md)."""

from ._client import Client
from ._errors import ApiError, ChecksumError, ClientError, RateLimited

__all__ = ["ApiError", "ChecksumError", "Client", "ClientError", "RateLimited"]
__version__ = "0.1.0"

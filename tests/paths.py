"""Where the tests find the checkout and the real data: defined once for every test module."""

from pipeline.settings import REPO_ROOT, default_data_dir

DATA_DIR = default_data_dir()

__all__ = ["DATA_DIR", "REPO_ROOT"]

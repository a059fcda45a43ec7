"""One producer per route dataset: each module's `produce(ctx)` returns the documents of its routes.

Dataset ids (`Produced.dataset`, e.g. "geography") are written into published manifests:
they keep their values even where a module is named differently, or rollback to an
older release would break.
"""

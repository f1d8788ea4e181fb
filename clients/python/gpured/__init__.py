# __init__.py: the gpured package: a Python client for the gpured HTTP service (docs/API.md).
"""Reductions and matrix products on a gpured service, NumPy in and NumPy out.

    import gpured, numpy as np
    c = gpured.Client("http://127.0.0.1:8080")
    c.sum(np.arange(10, dtype=np.int32))          # numpy.int64(45)
    c.argmax(np.random.rand(3, 5), axis=1)        # array of 3 int64 indices

See README.md for datasets, jobs, batches, events, errors, retries, the asyncio twin and gpured-cli.
"""
from .aio import AsyncClient
from .client import JSON_MAX_ELEMENTS, Client, Dataset, Job
from .errors import Error, JobFailed, LimitExceeded, NotFound, Timeout, Unavailable
from .events import Event, EventStream, JobWatch
from .waiting import ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION, as_completed, wait

__all__ = ["ALL_COMPLETED", "AsyncClient", "Client", "Dataset", "Error", "Event", "EventStream", "FIRST_COMPLETED",
           "FIRST_EXCEPTION", "JSON_MAX_ELEMENTS", "Job", "JobFailed", "JobWatch", "LimitExceeded", "NotFound", "Timeout",
           "Unavailable", "as_completed", "wait"]
__version__ = "0.1.0"

"""Campaigns: sweeps and schedule explorations as sets of independent, seeded runs, on one
core, on local processes or on a Dask cluster, with the results a serial run gives.

>>> from aiopim.campaign import Campaign, grid                       # doctest: +SKIP
>>> c = Campaign("va", "vector_add:host", grid(nr_dpus=[1, 2, 4]), {"nr_elements": 4096})
>>> results = c.run("va.campaign", jobs=2)                          # doctest: +SKIP
>>> print(results.text())                                           # doctest: +SKIP

See ``docs/campaigns.md``. Dask is imported only by its executor (``pip install -e
".[cluster]"``).
"""

from ._executors import DaskExecutor, SerialExecutor, local_processes
from ._explore import Explorer, ExploreReport, explore, replay_schedule
from ._figures import breakdown
from ._results import Results, format_ps
from ._run import execute_run
from ._spec import Campaign, CampaignError, RunSpec, derive_seed, grid, sample
from ._toml import CampaignFileError, load_campaign

__all__ = [
    "Campaign",
    "CampaignError",
    "CampaignFileError",
    "DaskExecutor",
    "ExploreReport",
    "Explorer",
    "Results",
    "RunSpec",
    "SerialExecutor",
    "breakdown",
    "derive_seed",
    "execute_run",
    "explore",
    "format_ps",
    "grid",
    "load_campaign",
    "local_processes",
    "replay_schedule",
    "sample",
]

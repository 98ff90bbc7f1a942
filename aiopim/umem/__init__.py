"""umem for PIM: one memory-context abstraction over host RAM, files, MRAM and WRAM.

>>> host, dev = Host(), Mram(dpus)                    # doctest: +SKIP
>>> with dev.aligned_alloc(128, 128) as d:             # doctest: +SKIP
...     with await d.connect(host, 80, 64) as h:       # a host mirror, paired with d
...         h.view(np.float64)[:] = range(10)
...         await h.sync()                             # push to MRAM (a rank job)
...         await h.update()                           # pull it back
"""

from ._blocks import Block
from ._context import Address, Context, DeviceType, Done, get_device_name_from_type
from ._dpu import Mram, Wram
from ._host import File, Host
from ._status import Status, StatusType, UmemError, get_status_name

__all__ = [
    "Address",
    "Block",
    "Context",
    "DeviceType",
    "Done",
    "File",
    "Host",
    "Mram",
    "Status",
    "StatusType",
    "UmemError",
    "Wram",
    "get_device_name_from_type",
    "get_status_name",
]

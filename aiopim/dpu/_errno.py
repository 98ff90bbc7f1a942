"""errno values of the DPU C library (``stdlib/errno.h``) and per-tasklet ``errno``."""

from __future__ import annotations

#: ``EALREADY``: ``handshake_wait_for`` on a notifier someone already waits for. [R] errno.h
EALREADY = 7
#: ``EINVAL``: invalid argument (buddy allocator). [R] errno.h
EINVAL = 28
#: ``ENOMEM``: not enough space (buddy allocator). [R] errno.h
ENOMEM = 49

#: the NULL pointer as a WRAM address (``__sys_zero`` keeps every object away from 0)
NULL = 0

"""Layer 2, the hardware model: machine configuration, ranks and their job queues, DPUs and
their memories, the DPU-execution interface, the trace recorder."""

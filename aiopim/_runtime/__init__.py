"""Layer 1, the virtual-time runtime: the kernel (clock, event heap, processes) and the bridge
to the host event loop (asyncio or trio)."""

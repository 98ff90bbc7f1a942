"""Layer 3, the SDK semantics: host operations (allocation, load, launch, transfers,
callbacks, WRAM FIFO links) turned into rank jobs."""

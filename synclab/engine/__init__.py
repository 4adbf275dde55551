"""The parts of vLLM the chapters stand on, with each pattern's baseline (the code before its PR).

Names and data structures follow vLLM (PoolingCursor, PoolingMetadata, InputBatch,
PlaceholderRange, ...); the chapters add their pieces here.
"""

"""The parts of vLLM the chapters stand on, with each pattern's baseline (the code before its PR).

Names and data structures follow vLLM (PoolingCursor, PoolingMetadata, InputBatch,
PlaceholderRange, ...); the chapters add their pieces here. Nothing here imports a chapter.

* pooling (chapters 1 and 2): :mod:`.pool_metadata` (``PoolingCursor``, ``PoolingMetadata``), :mod:`.pooler` (the
  pooling methods, ``DispatchPooler``), :mod:`.pooler_baseline` (ALL pooling before chapter 1's PR),
  :mod:`.model_runner` (``GPUModelRunner``'s output path), :mod:`.platform` (``current_platform``);
* transfers (chapter 3): :mod:`.torch_utils` (``async_tensor_h2d``), :mod:`.sampler` (logprobs of given tokens),
  :mod:`.model_inputs` (``token_type_ids``, fast-prefill padding), :mod:`.penalties` (``bincount``),
  :mod:`.dp_utils` (``_run_ar``), :mod:`.ngram_proposer_gpu`, :mod:`.bad_words`;
* placeholders (chapter 4): :mod:`.input_batch` (``InputBatch``'s repair), :mod:`.input_batch_baseline` (the
  forward scan);
* multimodal inputs (chapter 5): :mod:`.mm_inputs` (``PlaceholderRange``), :mod:`.encoder_cache_manager`,
  :mod:`.scheduler` (the encoder inputs' scheduling);
* the capstone's engine (chapter 6): :mod:`.engine_core` (one ``EngineCore`` step), :mod:`.tiny_llm` (the model),
  :mod:`.cuda_graphs` (its forward replayed from CUDA graphs on a GPU).
"""

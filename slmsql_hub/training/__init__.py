"""Training: the world's tiny tokenizer and base model, and the two-stage SFT LoRA adapter.

- :mod:`~slmsql_hub.training.configs`: the dataclasses a YAML recipe fills (``slmsql train base|sft --config``),
- :mod:`~slmsql_hub.training.tokenizer`: a small Qwen-style byte-level BPE tokenizer learnt from the world,
- :mod:`~slmsql_hub.training.base`: pretrains a tiny ``Qwen2ForCausalLM`` from scratch on the world's text,
- :mod:`~slmsql_hub.training.sft`: TRL ``SFTTrainer`` + PEFT LoRA, stage 1 then stage 2 on the same adapter.

Importing this package imports neither torch nor TRL; the submodules do.
"""

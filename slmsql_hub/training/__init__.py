"""Training: the two-stage SFT LoRA adapter and GRPO (the world's tokenizer and base model live in slmsql_hub.world).

- :mod:`~slmsql_hub.training.configs`: the dataclasses a YAML recipe fills (``slmsql train base|sft --config``),
- :mod:`~slmsql_hub.training.sft`: TRL ``SFTTrainer`` + PEFT LoRA, stage 1 then stage 2 on the same adapter.

Importing this package imports neither torch nor TRL; the submodules do.
"""

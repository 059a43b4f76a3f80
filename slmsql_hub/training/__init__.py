"""Training: the recipes' dataclasses (:mod:`~slmsql_hub.training.configs`), the two-stage SFT LoRA adapter
(:mod:`~slmsql_hub.training.sft`) and GRPO (:mod:`~slmsql_hub.training.grpo`); and the world's tiny base model
(:mod:`~slmsql_hub.training.base`, ``slmsql train base``). Importing this package imports neither torch nor TRL; the submodules do.
"""

"""Training: the recipes' dataclasses (:mod:`~slmsql_hub.training.configs`), the two-stage SFT LoRA adapter
(:mod:`~slmsql_hub.training.sft`) and GRPO (:mod:`~slmsql_hub.training.grpo`); the world's base model lives in
:mod:`slmsql_hub.world.pretrain`. Importing this package imports neither torch nor TRL; the submodules do.
"""

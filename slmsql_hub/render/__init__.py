"""Rendering shared by cards, reports and the Space: :mod:`~slmsql_hub.render.fmt` (numbers as printed),
:mod:`~slmsql_hub.render.plots` (matplotlib figures) and :mod:`~slmsql_hub.render.templates` (the jinja2 card
templates under ``model_card/``). Nothing here imports the stages."""

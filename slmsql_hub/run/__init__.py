"""The run folder, the floor every stage writes on: :mod:`~slmsql_hub.run.layout` names every file and folder
of a run (said once), :mod:`~slmsql_hub.run.files` reads and writes them, :mod:`~slmsql_hub.run.read` reads a
whole run back (:func:`~slmsql_hub.run.read.read_run`, :func:`~slmsql_hub.run.read.load_run`), and
:mod:`~slmsql_hub.run.metric_names` names the telemetry metrics readers quote. Nothing here imports the stages."""

"""The tasks' building blocks: hpctrain's Classifier (`classifier.py`) with its step without
Lightning's hook calls (`fastpath.py`) and as a CUDA graph (`graphs.py`), the networks
(`networks.py`), the datasets (`datasets/`), and the user's classes of task custom
(`userclasses.py`)."""

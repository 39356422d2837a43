"""Topic declarations and Connect sink configs, shipped as schedulerstream.topologies (see setup.py)."""

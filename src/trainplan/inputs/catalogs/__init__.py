"""The bundled catalogs: models, GPUs, prices, and the inputs of cost, energy and load time.

Every file in `data/` is read through `loader.load_yaml` and checked strictly (`loader.require`):
an unknown or missing key is an error at start-up, never a silent default.
"""

"""Package data: the models, corpora and paper reference numbers of the book (YAML files here).

Installed as ``anatomy_kit.data_manifest``; read it with :mod:`anatomy_kit.manifest`.
"""

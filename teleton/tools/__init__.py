"""The tools the model may call, one module per family, all behind the registry's one door (``registry``).

The tools and their scopes: docs/tools.md; the modules: docs/architecture.md, "Packages".
"""

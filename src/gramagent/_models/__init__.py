"""Wire-format adapters, one module each, behind the protocol in ``models.base``."""

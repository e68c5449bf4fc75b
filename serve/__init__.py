"""The BentoML service of the tagger (serve/service.py) and its browser page (serve/ui/)."""

"""Request and response models of the REST API, one module per resource.

Request models forbid unknown fields, so a misspelt option is a 422, never silently ignored.
"""

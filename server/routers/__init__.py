"""One router per resource of the API."""

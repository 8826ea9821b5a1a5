"""The Lambda edge: the API and jobs handlers, their events, the guard, Powertools, SnapStart hooks
and the API key read from Secrets Manager. Handlers are adapters over the packages below."""

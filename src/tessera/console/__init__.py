"""The operator console at ``/console``: server-rendered pages for the people who run an
instance (operators, who see every project) and for project owners (who sign in with their
project's write key and see that project only). Every action calls the same use-cases as the
API."""

"""Building a session from typed settings: the same for every front end."""

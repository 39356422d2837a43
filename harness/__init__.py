"""Real local processes (the processors, a scripted webhook receiver) that the tests and the
benches both start. Not shipped: it drives the installed CLI from outside, as a user would."""

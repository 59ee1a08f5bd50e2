"""The book's machinery, no mathematics: parameters, the chapter scaffold, the claims ledger, seeding,
devices, plotting, running and sweeping notebooks, building the book, and the command line."""

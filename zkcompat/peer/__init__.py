"""One server process: the term loop (elect, then serve a term), the shell that obeys the
ZAB roles' effects, and the wiring of each role's chain of stages."""

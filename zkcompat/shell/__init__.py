"""`zkcompat shell`: ZooKeeper 3.9's zkCli on kazoo, with zkCli's commands, flags and output.

commands.py parses and runs one command line against a Session (session.py) and knows
nothing of terminals; repl.py is the prompt_toolkit loop; main.py is the click entry.
"""

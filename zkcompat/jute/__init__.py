"""The ZooKeeper wire format (Jute): records, constants, framing. Imports nothing of zkcompat.

constants  op codes, error codes, event types, xids, jute.maxbuffer (ZooKeeper's values)
schema     every record of zookeeper.jute, declared once; gen.py turns it into records.py
records    GENERATED slotted record classes: X.decode(buf, off), x.encode(out), x.to_bytes()
multi      multi/multiRead bodies (MultiHeader-separated ops and results)
ops        op code -> request/response record tables
framing    4-byte length framing (FrameReader, frame) with NIOServerCnxn's bound
reply      whole framed replies and watch notifications in one bytes object
text       ustring bytes exactly as Java writes and reads them
errors     JuteError, the one codec error
"""

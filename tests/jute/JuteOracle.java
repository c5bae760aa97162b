// Test oracle: the real ZooKeeper classes (zookeeper.jar, zookeeper-jute.jar) answering
// one command per stdin line, one reply line each. Used by tests/jute to check zkcompat's
// codec byte for byte against Java. Commands:
//   fields <class>          the record's fields in declaration order: "<type> <name>;..."
//   rt <class> <hex>        deserialize with BinaryInputArchive, serialize again:
//                           "ok <hex> <bytes consumed>" or "err <exception>"
//   multireq <hex>          MultiOperationRecord round trip: "ok <hex> <consumed> <types>"
//   multiresp <hex>         MultiResponse round trip: "ok <hex> <consumed>"
//   string <hex>            new String(bytes, UTF_8): "ok <UTF-16BE hex> <writeString hex>"
//   consts                  ZooKeeper's constants: "ok Class.NAME=value ..."
//   golden <name>           bytes a real client or server builds for <name>
import java.io.*;
import java.lang.reflect.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.jute.BinaryInputArchive;
import org.apache.jute.BinaryOutputArchive;
import org.apache.jute.Record;
import org.apache.zookeeper.*;
import org.apache.zookeeper.data.*;
import org.apache.zookeeper.proto.*;

public class JuteOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String reply;
            try {
                reply = handle(line.split(" ", -1));
            } catch (Throwable t) {
                reply = "err " + t.getClass().getName() + ": " + String.valueOf(t.getMessage()).replace('\n', ' ');
            }
            out.println(reply);
            out.flush();
        }
    }

    static String handle(String[] p) throws Exception {
        switch (p[0]) {
            case "fields": return fields(p[1]);
            case "rt": return roundTrip(p[1], unhex(p[2]));
            case "multireq": return multiRequest(unhex(p[1]));
            case "multiresp": return multiResponse(unhex(p[1]));
            case "string": return string(unhex(p[1]));
            case "consts": return consts();
            case "golden": return "ok " + hex(golden(p[1]));
            default: throw new IllegalArgumentException("unknown command " + p[0]);
        }
    }

    static String fields(String cls) throws Exception {
        StringBuilder sb = new StringBuilder("ok ");
        for (Field f : Class.forName(cls).getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers())) continue;
            sb.append(f.getGenericType().getTypeName()).append(' ').append(f.getName()).append(';');
        }
        return sb.toString();
    }

    static String roundTrip(String cls, byte[] b) throws Exception {
        ByteArrayInputStream bais = new ByteArrayInputStream(b);
        BinaryInputArchive ia = BinaryInputArchive.getArchive(bais);
        ByteArrayOutputStream baos = new ByteArrayOutputStream();
        BinaryOutputArchive oa = BinaryOutputArchive.getArchive(baos);
        if (cls.endsWith(".ConnectRequest")) {
            // ZooKeeper 3.9 ProtocolManager.deserializeConnectRequest: readOnly is optional.
            int pv = ia.readInt("protocolVersion");
            long z = ia.readLong("lastZxidSeen");
            int to = ia.readInt("timeOut");
            long sid = ia.readLong("sessionId");
            byte[] pw = ia.readBuffer("passwd");
            oa.writeInt(pv, "");
            oa.writeLong(z, "");
            oa.writeInt(to, "");
            oa.writeLong(sid, "");
            oa.writeBuffer(pw, "");
            try {
                boolean ro = ia.readBool("readOnly");
                oa.writeBool(ro, "");
            } catch (Exception e) {
                // an old client: no readOnly, and none in the reply
            }
        } else if (cls.endsWith(".ConnectResponse")) {
            int pv = ia.readInt("protocolVersion");
            int to = ia.readInt("timeOut");
            long sid = ia.readLong("sessionId");
            byte[] pw = ia.readBuffer("passwd");
            oa.writeInt(pv, "");
            oa.writeInt(to, "");
            oa.writeLong(sid, "");
            oa.writeBuffer(pw, "");
            try {
                boolean ro = ia.readBool("readOnly");
                oa.writeBool(ro, "");
            } catch (Exception e) {
                // an old server
            }
        } else {
            Record r = (Record) Class.forName(cls).getDeclaredConstructor().newInstance();
            r.deserialize(ia, "r");
            r.serialize(oa, "r");
        }
        return "ok " + hex(baos.toByteArray()) + " " + (b.length - bais.available());
    }

    static String multiRequest(byte[] b) throws Exception {
        ByteArrayInputStream bais = new ByteArrayInputStream(b);
        MultiOperationRecord m = new MultiOperationRecord();
        m.deserialize(BinaryInputArchive.getArchive(bais), "r");
        ByteArrayOutputStream baos = new ByteArrayOutputStream();
        m.serialize(BinaryOutputArchive.getArchive(baos), "r");
        StringBuilder types = new StringBuilder();
        for (Op op : m) {
            types.append(op.getType()).append(',');
        }
        return "ok " + hex(baos.toByteArray()) + " " + (b.length - bais.available()) + " " + types;
    }

    static String multiResponse(byte[] b) throws Exception {
        ByteArrayInputStream bais = new ByteArrayInputStream(b);
        MultiResponse m = new MultiResponse();
        m.deserialize(BinaryInputArchive.getArchive(bais), "r");
        ByteArrayOutputStream baos = new ByteArrayOutputStream();
        m.serialize(BinaryOutputArchive.getArchive(baos), "r");
        return "ok " + hex(baos.toByteArray()) + " " + (b.length - bais.available());
    }

    static String string(byte[] b) throws Exception {
        String s = new String(b, StandardCharsets.UTF_8);
        ByteArrayOutputStream baos = new ByteArrayOutputStream();
        BinaryOutputArchive.getArchive(baos).writeString(s, "s");
        byte[] written = baos.toByteArray();
        return "ok " + hex(s.getBytes(StandardCharsets.UTF_16BE)) + " "
            + hex(Arrays.copyOfRange(written, 4, written.length));
    }

    static String consts() throws Exception {
        StringBuilder sb = new StringBuilder("ok");
        for (Field f : ZooDefs.OpCode.class.getFields()) {
            sb.append(" OpCode.").append(f.getName()).append('=').append(f.getInt(null));
        }
        for (Field f : ZooDefs.Perms.class.getFields()) {
            sb.append(" Perms.").append(f.getName()).append('=').append(f.getInt(null));
        }
        for (KeeperException.Code c : KeeperException.Code.values()) {
            sb.append(" Code.").append(c.name()).append('=').append(c.intValue());
        }
        for (Watcher.Event.EventType e : Watcher.Event.EventType.values()) {
            sb.append(" EventType.").append(e.name()).append('=').append(e.getIntValue());
        }
        for (Watcher.Event.KeeperState e : Watcher.Event.KeeperState.values()) {
            sb.append(" KeeperState.").append(e.name()).append('=').append(e.getIntValue());
        }
        for (CreateMode m : CreateMode.values()) {
            sb.append(" CreateMode.").append(m.name()).append('=').append(m.toFlag());
        }
        for (AddWatchMode m : AddWatchMode.values()) {
            sb.append(" AddWatchMode.").append(m.name()).append('=').append(m.getMode());
        }
        for (Watcher.WatcherType t : Watcher.WatcherType.values()) {
            sb.append(" WatcherType.").append(t.name()).append('=').append(t.getIntValue());
        }
        for (String name : new String[] {"NOTIFICATION_XID", "PING_XID", "AUTHPACKET_XID", "SET_WATCHES_XID"}) {
            Field f = ClientCnxn.class.getDeclaredField(name);
            f.setAccessible(true);
            sb.append(" ClientCnxn.").append(name).append('=').append(f.getInt(null));
        }
        sb.append(" BinaryInputArchive.maxBuffer=").append(BinaryInputArchive.maxBuffer);
        return sb.toString();
    }

    static Stat stat(long base) {
        return new Stat(base + 1, base + 2, base + 3, base + 4, 5, 6, 7, base + 8, 9, 10, base + 11);
    }

    // A request frame as ClientCnxn.Packet.createBB builds it: length, RequestHeader, record.
    static byte[] request(int xid, int type, Record r) throws IOException {
        ByteArrayOutputStream baos = new ByteArrayOutputStream();
        BinaryOutputArchive boa = BinaryOutputArchive.getArchive(baos);
        boa.writeInt(-1, "len");
        if (type != Integer.MIN_VALUE) {
            new RequestHeader(xid, type).serialize(boa, "header");
        }
        if (r != null) {
            r.serialize(boa, "request");
        }
        byte[] b = baos.toByteArray();
        int n = b.length - 4;
        b[0] = (byte) (n >>> 24); b[1] = (byte) (n >>> 16); b[2] = (byte) (n >>> 8); b[3] = (byte) n;
        return b;
    }

    // ClientCnxn.Packet.createBB in 3.8 for a ConnectRequest: the record, then readOnly.
    static byte[] connect(ConnectRequest r, boolean readOnly) throws IOException {
        ByteArrayOutputStream baos = new ByteArrayOutputStream();
        BinaryOutputArchive boa = BinaryOutputArchive.getArchive(baos);
        boa.writeInt(-1, "len");
        r.serialize(boa, "connect");
        boa.writeBool(readOnly, "readOnly");
        byte[] b = baos.toByteArray();
        int n = b.length - 4;
        b[0] = (byte) (n >>> 24); b[1] = (byte) (n >>> 16); b[2] = (byte) (n >>> 8); b[3] = (byte) n;
        return b;
    }

    // A reply frame as ServerCnxn.sendResponse builds it: length, ReplyHeader, record.
    static byte[] reply(ReplyHeader h, Record r) throws IOException {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        BinaryOutputArchive boa = BinaryOutputArchive.getArchive(body);
        h.serialize(boa, "header");
        if (r != null) {
            r.serialize(boa, "response");
        }
        ByteArrayOutputStream framed = new ByteArrayOutputStream();
        new DataOutputStream(framed).writeInt(body.size());
        body.writeTo(framed);
        return framed.toByteArray();
    }

    static byte[] golden(String name) throws Exception {
        switch (name) {
            case "connect_request": {
                // ClientCnxn.SendThread.primeConnection: a fresh session, readOnly=false.
                // (3.8 writes readOnly after the record, 3.9 inside it: the same bytes.)
                return connect(new ConnectRequest(0, 0L, 30000, 0L, new byte[16]), false);
            }
            case "connect_request_reconnect": {
                byte[] pw = new byte[16];
                for (int i = 0; i < 16; i++) pw[i] = (byte) (0xA0 + i);
                return connect(new ConnectRequest(0, 0x100000002L, 10000, 0x1234567890ABCDEFL, pw), true);
            }
            case "connect_request_old_client": {
                // A 3.3 client: no readOnly at all.
                return request(0, Integer.MIN_VALUE, new ConnectRequest(0, 0L, 30000, 0L, new byte[16]));
            }
            case "create_request": {
                List<ACL> acl = new ArrayList<>(ZooDefs.Ids.OPEN_ACL_UNSAFE);
                acl.add(new ACL(ZooDefs.Perms.READ | ZooDefs.Perms.ADMIN, new Id("digest", "bob:Xk2/h=")));
                return request(5, ZooDefs.OpCode.create, new CreateRequest("/app/lock-", "hello".getBytes(StandardCharsets.UTF_8), acl, CreateMode.EPHEMERAL_SEQUENTIAL.toFlag()));
            }
            case "multi_request": {
                MultiOperationRecord m = new MultiOperationRecord(Arrays.asList(
                    Op.create("/m/a", new byte[] {1, 2, 3}, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.delete("/m/b", 4),
                    Op.check("/m", -1)));
                return request(9, ZooDefs.OpCode.multi, m);
            }
            case "multi_response": {
                MultiResponse m = new MultiResponse();
                m.add(new OpResult.CreateResult("/m/a"));
                m.add(new OpResult.CreateResult("/m/c", stat(100)));
                m.add(new OpResult.SetDataResult(stat(200)));
                m.add(new OpResult.DeleteResult());
                m.add(new OpResult.CheckResult());
                m.add(new OpResult.ErrorResult(KeeperException.Code.NONODE.intValue()));
                return reply(new ReplyHeader(9, 0x300000007L, 0), m);
            }
            case "reply_header": {
                return reply(new ReplyHeader(7, 0x100000005L, KeeperException.Code.NONODE.intValue()), null);
            }
            case "get_data_reply": {
                return reply(new ReplyHeader(12, 0x500000001L, 0), new GetDataResponse("some data".getBytes(StandardCharsets.UTF_8), stat(0x500000000L)));
            }
            case "notification": {
                // NIOServerCnxn.process(WatchedEvent): ReplyHeader(NOTIFICATION_XID, zxid, 0) + WatcherEvent.
                WatcherEvent e = new WatcherEvent(Watcher.Event.EventType.NodeDataChanged.getIntValue(), Watcher.Event.KeeperState.SyncConnected.getIntValue(), "/a/b");
                return reply(new ReplyHeader(-1, -1L, 0), e);
            }
            case "ping": {
                return request(-2, ZooDefs.OpCode.ping, null);
            }
            default:
                throw new IllegalArgumentException("unknown golden " + name);
        }
    }

    static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }
}

import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.admin.ZooKeeperAdmin;
import org.apache.zookeeper.data.Stat;

/**
 * A ZooKeeperAdmin session as an operator's tool runs one: getConfig with a watch,
 * reconfigure (remove, add back, a whole membership, a stale fromConfig), then a plain
 * client whose server list grows with updateServerList. Prints one line per step.
 * Arguments: the connect string of server 1 alone, then the full one, then server 1's
 * spec for reconfig -add.
 */
public class ReconfigAdmin {
    static String text(byte[] data) {
        return new String(data, StandardCharsets.UTF_8).replace("\n", " | ");
    }

    static long version(byte[] config) {
        String s = new String(config, StandardCharsets.UTF_8);
        return Long.parseLong(s.substring(s.lastIndexOf("version=") + 8).trim(), 16);
    }

    public static void main(String[] args) throws Exception {
        String first = args[0], all = args[1], server1 = args[2];
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CountDownLatch connected = new CountDownLatch(1);
        Watcher watcher = (WatchedEvent e) -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected
                    && e.getType() == Watcher.Event.EventType.None) {
                connected.countDown();
            } else if (e.getType() != Watcher.Event.EventType.None) {
                events.add(e.getType() + " " + e.getPath());
            }
        };
        ZooKeeperAdmin admin = new ZooKeeperAdmin(all, 30000, watcher);
        if (!connected.await(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection");
        }
        admin.addAuthInfo("digest", "super:test".getBytes(StandardCharsets.UTF_8));
        Stat stat = new Stat();
        byte[] config = admin.getConfig(true, stat);
        System.out.println("getConfig: " + text(config) + " statVersion=" + stat.getVersion());

        byte[] after = admin.reconfigure(null, "1", null, -1, stat);
        System.out.println("remove 1: " + text(after) + " statVersion=" + stat.getVersion());
        System.out.println("watch: " + events.poll(10, TimeUnit.SECONDS));

        after = admin.reconfigure(server1, null, null, version(after), stat);
        System.out.println("add 1 from its version: " + text(after));

        try {
            admin.reconfigure(null, "2", null, version(after) + 1, stat);
            System.out.println("stale fromConfig: accepted");
        } catch (KeeperException e) {
            System.out.println("stale fromConfig: " + e.code());
        }
        String members = text(after).replaceAll(" \\| version=.*", "").replace(" | ", ",");
        after = admin.reconfigure(null, null, members, -1, stat);
        System.out.println("whole membership: " + text(after));
        try {
            admin.reconfigure(null, null, "server.1=nonsense", -1, stat);
            System.out.println("bad membership: accepted");
        } catch (KeeperException e) {
            System.out.println("bad membership: " + e.code());
        }
        admin.close();

        CountDownLatch plainUp = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(first, 30000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                plainUp.countDown();
            }
        });
        if (!plainUp.await(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection");
        }
        long session = zk.getSessionId();
        zk.create("/update-server-list", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                  CreateMode.EPHEMERAL);
        zk.updateServerList(all);  // may move the session to another server at once
        Stat s = null;
        for (int i = 0; ; i++) {
            try {
                s = zk.exists("/update-server-list", false);
                break;
            } catch (KeeperException.ConnectionLossException e) {
                if (i == 100) {
                    throw e;
                }
                Thread.sleep(100);  // reconnecting, to the server it moves to
            }
        }
        System.out.println("updateServerList: same session " + (zk.getSessionId() == session)
                           + ", its ephemeral " + (s != null && s.getEphemeralOwner() == session));
        zk.close();
    }
}

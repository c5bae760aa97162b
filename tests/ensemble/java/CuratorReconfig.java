import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

/**
 * Curator's reconfig API as a tool uses it: getConfig().forEnsemble(), then reconfig()
 * leaving, joining with fromConfig, a stale fromConfig, and withNewMembers, each printed.
 * Arguments: the connect string, then server 1's spec for joining.
 */
public class CuratorReconfig {
    static String text(byte[] data) {
        return new String(data, StandardCharsets.UTF_8).replace("\n", " | ");
    }

    static long version(byte[] config) {
        String s = new String(config, StandardCharsets.UTF_8);
        return Long.parseLong(s.substring(s.lastIndexOf("version=") + 8).trim(), 16);
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[0])
            .retryPolicy(new RetryNTimes(20, 200))
            .authorization("digest", "super:test".getBytes(StandardCharsets.UTF_8))
            .ensembleTracker(false)
            .build();
        client.start();
        client.blockUntilConnected();
        Stat stat = new Stat();
        byte[] config = client.getConfig().storingStatIn(stat).forEnsemble();
        System.out.println("getConfig: " + text(config) + " statVersion=" + stat.getVersion());
        byte[] after = client.reconfig().leaving("1").fromConfig(version(config)).forEnsemble();
        System.out.println("leaving 1: " + text(after));
        after = client.reconfig().joining(args[1]).fromConfig(version(after)).forEnsemble();
        System.out.println("joining 1: " + text(after));
        try {
            client.reconfig().leaving("2").fromConfig(version(after) - 1).forEnsemble();
            System.out.println("stale fromConfig: accepted");
        } catch (KeeperException e) {
            System.out.println("stale fromConfig: " + e.code());
        }
        List<String> members = Arrays.asList(
            text(after).replaceAll(" \\| version=.*", "").split(" \\| "));
        after = client.reconfig().withNewMembers(members).forEnsemble();
        System.out.println("withNewMembers: " + text(after));
        client.close();
    }
}

// Prints Kafka's own murmur2 placement for keys read from stdin, one hex-encoded key per line.
// Run with the Kafka jars on the class path (JDK 11+ single-file source launcher):
//   java -cp "$HOME/.cache/schedulerstream/kafka-4.1.1/libs/*" tests/vectors/Murmur2Vectors.java 1 3 12 < keys
// Each output line: hex key, Utils.murmur2, Utils.toPositive(murmur2), then
// BuiltInPartitioner.partitionForKey (what the Java producer uses for keyed records) for each
// partition count given as an argument, tab-separated.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

public class Murmur2Vectors {
    public static void main(String[] args) throws Exception {
        int[] counts = new int[args.length];
        for (int i = 0; i < args.length; i++) {
            counts[i] = Integer.parseInt(args[i]);
        }
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String keyHex = line.strip();
            if (keyHex.equals(".")) {
                keyHex = "";  // an empty line would be ambiguous; "." stands for the empty key
            }
            byte[] key = hex.parseHex(keyHex);
            int hash = Utils.murmur2(key);
            out.append(keyHex).append('\t').append(hash).append('\t').append(Utils.toPositive(hash));
            for (int count : counts) {
                out.append('\t').append(BuiltInPartitioner.partitionForKey(key, count));
            }
            out.append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }
}

// Reads cron.run-state values (hex, one per line on stdin) with Kafka Connect's stock
// JsonConverter (schemas.enable=true) and prints each resulting Struct as one JSON line:
// {"schema": "<name>", "fields": {"<field>": <value>, ...}}. Exits non-zero on any failure.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Map;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;

public class ReadRunState {
    public static void main(String[] args) throws Exception {
        PrintStream stdout = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true"), false);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            byte[] value = HexFormat.of().parseHex(line.trim());
            SchemaAndValue data = converter.toConnectData("run-state", value);
            Struct struct = (Struct) data.value();
            struct.validate();
            StringBuilder out = new StringBuilder("{\"schema\": " + quote(data.schema().name()));
            out.append(", \"fields\": {");
            String sep = "";
            for (Field field : data.schema().fields()) {
                Object v = struct.get(field);
                String text = v == null ? "null" : v instanceof String ? quote((String) v) : v.toString();
                out.append(sep).append("\"").append(field.name()).append("\": ").append(text);
                sep = ", ";
            }
            stdout.println(out.append("}}"));
        }
    }

    static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }
}

// A stock Java producer writing schedules to the schedule topic, in both encodings of the
// contract (README.md, "The schedule topic: a public contract"). Used by test_java_producer.py:
//
//   java -cp '<avro jars>/*:<kafka jars>/*' ProduceSchedules.java BOOTSTRAP TOPIC SCHEMA_DIR
//
// Once the schema is parsed and the producer has the topic's metadata it prints "ready", then
// reads one record a line from stdin until EOF (so the caller can pick instants after the JVM's
// start-up): `json <TAB> TENANT/JOB_ID <TAB> JSON_TEXT` sends JSON_TEXT as the UTF-8 value;
// `avro <TAB> TENANT/JOB_ID <TAB> AT_US` builds a JobDefinition (one `at` instant, a Kafka
// target, every other field its schema default) with Apache Avro's generic API and sends its
// single-object encoding from BinaryMessageEncoder. Keys are Strings (StringSerializer) and the
// partitioner is the client's default. For every record it prints one line:
// KEY <TAB> PARTITION <TAB> OFFSET <TAB> VALUE_HEX.

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.generic.GenericRecordBuilder;
import org.apache.avro.message.BinaryMessageEncoder;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ProduceSchedules {
  static final String NS = "io.schedulerstream.";
  // The named types JobDefinition refers to, parsed (in this order) before it, by one parser.
  static final String[] REFERENCED = {
    "DateRange", "ScheduleSpec", "HttpTarget", "KafkaTarget", "SqsTarget", "WorkerTarget", "RetryPolicy", "NotifySpec"
  };

  static Schema jobDefinitionSchema(File dir) throws Exception {
    Schema.Parser parser = new Schema.Parser();
    for (String name : REFERENCED) {
      parser.parse(new File(dir, NS + name + ".avsc"));
    }
    return parser.parse(new File(dir, NS + "JobDefinition.avsc"));
  }

  static GenericRecord jobAt(Schema job, String key, long atUs) {
    String[] parts = key.split("/", 2);
    Schema spec = job.getField("schedule").schema();
    Schema kafkaTarget = null;
    for (Schema branch : job.getField("target").schema().getTypes()) {
      if (branch.getFullName().equals(NS + "KafkaTarget")) {
        kafkaTarget = branch;
      }
    }
    Schema retry = job.getField("retry").schema();
    return new GenericRecordBuilder(job)
        .set("tenant", parts[0])
        .set("job_id", parts[1])
        .set("version", System.currentTimeMillis() * 1000L)
        .set("schedule", new GenericRecordBuilder(spec).set("at_us", atUs).build())
        .set("target", new GenericRecordBuilder(kafkaTarget).set("topic", "interop.out").build())
        .set("retry", new GenericRecordBuilder(retry).build())
        .build();
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: ProduceSchedules BOOTSTRAP TOPIC SCHEMA_DIR < records");
      System.exit(2);
    }
    String topic = args[1];
    Schema job = jobDefinitionSchema(new File(args[2]));
    BinaryMessageEncoder<GenericRecord> encoder =
        new BinaryMessageEncoder<>(GenericData.get(), job);

    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "interop-java-producer");

    List<String> keys = new ArrayList<>();
    List<byte[]> values = new ArrayList<>();
    List<Future<RecordMetadata>> sent = new ArrayList<>();
    try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(props)) {
      producer.partitionsFor(topic); // connect and fetch metadata before saying ready
      System.out.println("ready");
      System.out.flush();
      BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        String[] fields = line.split("\t", 3);
        String key = fields[1];
        byte[] value;
        if (fields[0].equals("json")) {
          value = fields[2].getBytes(StandardCharsets.UTF_8);
        } else if (fields[0].equals("avro")) {
          ByteBuffer buffer = encoder.encode(jobAt(job, key, Long.parseLong(fields[2])));
          value = new byte[buffer.remaining()];
          buffer.get(value);
        } else {
          throw new IllegalArgumentException("unknown record kind " + fields[0]);
        }
        keys.add(key);
        values.add(value);
        sent.add(producer.send(new ProducerRecord<>(topic, key, value)));
      }
      producer.flush();
      HexFormat hex = HexFormat.of();
      for (int i = 0; i < sent.size(); i++) {
        RecordMetadata meta = sent.get(i).get();
        System.out.println(
            keys.get(i) + "\t" + meta.partition() + "\t" + meta.offset() + "\t"
                + hex.formatHex(values.get(i)));
      }
    }
  }
}

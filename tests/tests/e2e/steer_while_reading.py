import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("client", sys.argv[1])
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
client = example.Client(example.socket_path())
session = client.call("session/create", {"cwd": sys.argv[2]})["session_id"]
client.call("session/subscribe", {"session_id": session, "since_seq": 0})
client.call("session/submit", {"session_id": session, "text": "go"})
seqs, kinds = [], []
for item in client.items():
    if item["type"] == "end":
        break
    seqs.append(item["seq"])
    kinds.append(item["kind"])
    # Steer while reading: every write comes while later events may wait in the read buffer.
    if item["kind"] in ("session_start", "user_input", "tool_call_start"):
        client.call("session/steer", {"session_id": session, "text": "steer at " + item["kind"]})
    # The tool waits for this file, so every steer lands while the work is still going.
    if item["kind"] == "tool_call_start":
        open(sys.argv[3], "w").close()
    if item["kind"] == "processing_end":
        break
print(json.dumps({"seqs": seqs, "kinds": kinds}))

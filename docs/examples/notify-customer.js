// A reminder through your own API with a bearer secret: the key is never in the script,
// and shows as [secret API_TOKEN] in every run. Payload: {"api": "https://api.example.com", "customer": 7, "message": "…"}
export default async function (event) {
  const {api, customer, message} = event.payload;
  const token = await almanac.secrets.get("API_TOKEN");
  const res = await fetch(`${api}/v1/customers/${customer}/notifications`, {
    method: "POST",
    headers: {Authorization: `Bearer ${token}`, "Content-Type": "application/json"},
    body: JSON.stringify({message}),
  });
  if (!res.ok) throw new Error(`refused: ${res.status} ${await res.text()}`);  // retried by the schedule
  return {status: res.status};
}

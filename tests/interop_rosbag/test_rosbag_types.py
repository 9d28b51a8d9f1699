"""Every imported message type, from a sqlite3-storage bag written in the test by rosbags' Writer:
image encodings (rgb8, bgr8, mono8, 16UC1 big- and little-endian, padded rows), CompressedImage PNG
(colour and 16-bit depth), JointState (joint order changing), geometry twists/poses/wrenches, multi-arrays,
scalars; plain .db3/.mcap files; a topic whose stamps are unset."""

import io
import warnings

import numpy as np
import pytest

pytest.importorskip("rosbags")
from PIL import Image  # noqa: E402

from trajstore.errors import FormatError  # noqa: E402
from trajstore.interop.rosbag import RosbagWarning, import_rosbag, read_bag, stream_name  # noqa: E402
from trajstore.streams import StreamBuffer  # noqa: E402

from .bags import T, T0, header, image, vec3, write_bag  # noqa: E402

H, W = 6, 8
MS = 1_000_000


def rgb(k):
    img = np.zeros((H, W, 3), np.uint8)
    img[..., 0] = k
    img[..., 1] = np.arange(W)[None, :] * 10
    img[..., 2] = np.arange(H)[:, None] * 20
    return img


def depth(k):
    return (np.arange(H * W, dtype=np.uint16).reshape(H, W) * 1000 + k).astype(np.uint16)


def png(array):
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return np.frombuffer(buf.getvalue(), np.uint8)


def messages(n=5):
    out = []
    names = ["j1", "j2", "j3"]
    for k in range(n):
        ns = T0 + k * 100 * MS
        out.append(("/rgb", "sensor_msgs/msg/Image", ns + 1, image(ns, H, W, "rgb8", rgb(k))))
        bgr = image(ns, H, W, "bgr8", rgb(k)[..., ::-1], step=W * 3 + 4)  # rows padded by 4 bytes
        out.append(("/bgr", "sensor_msgs/msg/Image", ns + 2, bgr))
        out.append(("/mono", "sensor_msgs/msg/Image", ns + 3, image(ns, H, W, "mono8", rgb(k)[..., 1])))
        out.append(("/depth", "sensor_msgs/msg/Image", ns + 4, image(ns, H, W, "16UC1", depth(k))))
        out.append(("/depth_be", "sensor_msgs/msg/Image", ns + 5,
                    image(ns, H, W, "mono16", depth(k).astype(">u2"), bigendian=1)))
        out.append(("/png", "sensor_msgs/msg/CompressedImage", ns + 6,
                    T["sensor_msgs/msg/CompressedImage"](header=header(ns), format="png", data=png(rgb(k)))))
        out.append(("/png_depth", "sensor_msgs/msg/CompressedImage", ns + 7,
                    T["sensor_msgs/msg/CompressedImage"](header=header(ns), format="16UC1; png", data=png(depth(k)))))
        order = names if k % 2 == 0 else names[::-1]  # the driver lists joints in another order
        pos = {"j1": k + 0.1, "j2": k + 0.2, "j3": k + 0.3}
        out.append(("/joints", "sensor_msgs/msg/JointState", ns + 8, T["sensor_msgs/msg/JointState"](
            header=header(ns), name=order, position=np.array([pos[j] for j in order]),
            velocity=np.zeros(0), effort=np.array([-pos[j] for j in order]))))
        twist = T["geometry_msgs/msg/Twist"](linear=vec3(k, 1, 2), angular=vec3(3, 4, k))
        out.append(("/cmd_vel", "geometry_msgs/msg/Twist", ns + 9, twist))
        out.append(("/cmd_vel_stamped", "geometry_msgs/msg/TwistStamped", ns + 10,
                    T["geometry_msgs/msg/TwistStamped"](header=header(ns - 5 * MS), twist=twist)))
        pose = T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=k, y=0.5, z=1.5),
                                           orientation=T["geometry_msgs/msg/Quaternion"](x=0, y=0, z=0.6, w=0.8))
        out.append(("/pose", "geometry_msgs/msg/Pose", ns + 11, pose))
        out.append(("/ee/pose", "geometry_msgs/msg/PoseStamped", ns + 12,
                    T["geometry_msgs/msg/PoseStamped"](header=header(ns), pose=pose)))
        out.append(("/ft", "geometry_msgs/msg/WrenchStamped", ns + 13, T["geometry_msgs/msg/WrenchStamped"](
            header=header(ns), wrench=T["geometry_msgs/msg/Wrench"](force=vec3(k, 0, -9), torque=vec3(0, k, 0)))))
        layout = T["std_msgs/msg/MultiArrayLayout"](dim=[
            T["std_msgs/msg/MultiArrayDimension"](label="rows", size=2, stride=6),
            T["std_msgs/msg/MultiArrayDimension"](label="cols", size=3, stride=3)], data_offset=0)
        out.append(("/grid", "std_msgs/msg/Float32MultiArray", ns + 14, T["std_msgs/msg/Float32MultiArray"](
            layout=layout, data=np.arange(6, dtype=np.float32) + k)))
        out.append(("/gripper", "std_msgs/msg/Float64", ns + 15, T["std_msgs/msg/Float64"](data=k / 10)))
        out.append(("/unstamped", "sensor_msgs/msg/JointState", ns + 16, T["sensor_msgs/msg/JointState"](
            header=header(0), name=["a"], position=np.array([float(k)]), velocity=np.zeros(0), effort=np.zeros(0))))
        out.append(("/log", "rcl_interfaces/msg/Log", ns + 17, T["rcl_interfaces/msg/Log"](
            stamp=T["builtin_interfaces/msg/Time"](sec=0, nanosec=0), level=20, name="n", msg="hello", file="f",
            function="g", line=1)))
    return out


@pytest.fixture(scope="module")
def sqlite_bag(tmp_path_factory):
    return write_bag(tmp_path_factory.mktemp("bags") / "types", messages())


@pytest.fixture(scope="module")
def data(sqlite_bag):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = read_bag(sqlite_bag)
    return out, [str(w.message) for w in caught if issubclass(w.category, RosbagWarning)]


def test_stream_names():
    assert stream_name("/camera/image_raw") == "camera.image_raw"
    assert stream_name("/ee/pose") == "ee.pose"
    assert stream_name("/robot 1/joint:states") == "robot_1.joint_states"
    assert stream_name("/timestamp") == "timestamp_"


def test_images(data):
    d, _ = data
    for name in ("rgb", "bgr", "png"):
        assert d[name].space.shape == (H, W, 3) and d[name].space.metadata["kind"] == "image"
        np.testing.assert_array_equal(d[name].values, np.stack([rgb(k) for k in range(5)]))
    np.testing.assert_array_equal(d["mono"].values, np.stack([rgb(k)[..., 1] for k in range(5)]))
    assert d["mono"].space.metadata["layout"] == "HW"
    for name in ("depth", "depth_be", "png_depth"):
        sp = d[name].space
        assert (sp.shape, sp.dtype, sp.metadata["kind"], sp.metadata["units"]) == ((H, W), np.uint16, "depth", "mm")
        np.testing.assert_array_equal(d[name].values, np.stack([depth(k) for k in range(5)]))
    np.testing.assert_array_equal(d["rgb"].t_ns, T0 + np.arange(5) * 100 * MS)
    assert d["rgb"].space.metadata["fps"] == 10.0


def test_joint_state_reordered_to_the_first_message(data):
    d, _ = data
    j = d["joints"]
    assert list(j.space.spaces) == ["position", "effort"]  # velocity is empty
    assert list(j.space.metadata["names"]) == ["j1", "j2", "j3"]
    k = np.arange(5)[:, None]
    np.testing.assert_allclose(j.values["position"], k + np.array([0.1, 0.2, 0.3]), rtol=0, atol=0)
    np.testing.assert_array_equal(j.values["effort"], -j.values["position"])


def test_geometry_and_arrays(data):
    d, _ = data
    k = np.arange(5.0)
    tw = d["cmd_vel"]
    np.testing.assert_array_equal(tw.values["linear"], np.column_stack([k, np.ones(5), 2 * np.ones(5)]))
    np.testing.assert_array_equal(tw.values["angular"], np.column_stack([3 * np.ones(5), 4 * np.ones(5), k]))
    assert tw.space.spaces["linear"].metadata["units"] == "m/s"
    np.testing.assert_array_equal(tw.t_ns, T0 + np.arange(5) * 100 * MS + 9)  # no header: log time
    st = d["cmd_vel_stamped"]
    np.testing.assert_array_equal(st.values["linear"], tw.values["linear"])
    np.testing.assert_array_equal(st.t_ns, T0 + np.arange(5) * 100 * MS - 5 * MS)  # header stamp
    for name in ("pose", "ee.pose"):
        np.testing.assert_array_equal(d[name].values["position"], np.column_stack([k, np.full(5, .5), np.full(5, 1.5)]))
        np.testing.assert_allclose(d[name].values["orientation"], np.tile([0, 0, 0.6, 0.8], (5, 1)))
    ft = d["ft"]
    np.testing.assert_array_equal(ft.values["force"], np.column_stack([k, np.zeros(5), np.full(5, -9.0)]))
    assert ft.space.spaces["torque"].metadata["units"] == "N*m"
    g = d["grid"]
    assert g.space.shape == (2, 3) and g.space.dtype == np.float32
    assert list(g.space.metadata["dims"]) == ["rows", "cols"]
    np.testing.assert_array_equal(g.values, (np.arange(6, dtype=np.float32)[None] + k[:, None]).reshape(5, 2, 3))
    np.testing.assert_array_equal(d["gripper"].values, k / 10)


def test_unset_stamps_use_log_time_and_unknown_types_are_left_out(data):
    d, warned = data
    np.testing.assert_array_equal(d["unstamped"].t_ns, T0 + np.arange(5) * 100 * MS + 16)
    assert any("/unstamped" in w and "unset" in w for w in warned)
    assert "log" not in d
    assert any("/log (rcl_interfaces/msg/Log)" in w for w in warned)


def test_listed_topic_of_unknown_type_is_refused(sqlite_bag, tmp_path):
    with pytest.raises(FormatError, match="/log.*rcl_interfaces/msg/Log.*not imported"):
        import_rosbag(sqlite_bag, tmp_path / "out", topics={"/log": "log"})
    with pytest.raises(ValueError, match=r"\['/nope'\] are in none of the bags"):
        import_rosbag(sqlite_bag, tmp_path / "out", topics={"/nope": "x"})
    with pytest.raises(ValueError, match="topics /rgb, /bgr would all be the stream .cam.*--topic /bgr=NAME"):
        import_rosbag(sqlite_bag, tmp_path / "out", topics={"/rgb": "cam", "/bgr": "cam"})
    assert not (tmp_path / "out").exists()


def test_import_sqlite_bag_into_a_stream_buffer(sqlite_bag, tmp_path):
    out = tmp_path / "buf"
    summary = import_rosbag([sqlite_bag, sqlite_bag.parent / "types" / "types.db3"], out,
                            topics={"/rgb": "wrist", "/depth": "depth", "/joints": None, "/ft": "ft"}, only=True,
                            camera="jpeg")
    assert summary.streams == {"/rgb": "wrist", "/depth": "depth", "/joints": "joints", "/ft": "ft"}
    with StreamBuffer.load_from(out) as buf:
        assert buf.num_episodes == 2  # the folder, then its .db3 file alone
        assert buf.episode(1).data["bag"] == "types.db3"
        t, d = buf.read("depth", episode=1)
        np.testing.assert_array_equal(d, np.stack([depth(k) for k in range(5)]))  # 16-bit PNG: exact
        t, frames = buf.read("wrist", episode=0)
        assert np.abs(frames.astype(int) - np.stack([rgb(k) for k in range(5)]).astype(int)).mean() < 3  # JPEG
        _, ft = buf.read("ft", episode=0)
        np.testing.assert_array_equal(ft["torque"][:, 1], np.arange(5.0))


def test_plain_mcap_file(tmp_path):
    bag = write_bag(tmp_path / "m", messages(3), storage="mcap")
    d = read_bag(bag / "m.mcap", topics=["/rgb", "/joints"], only=True)
    np.testing.assert_array_equal(d["rgb"].values, np.stack([rgb(k) for k in range(3)]))
    assert d["joints"].values["position"].shape == (3, 3)


def test_changing_sizes_and_backwards_stamps_are_refused(tmp_path):
    ns = [T0, T0 + 10 * MS]
    bad_size = [("/cam", "sensor_msgs/msg/Image", ns[0], image(ns[0], H, W, "rgb8", rgb(0))),
                ("/cam", "sensor_msgs/msg/Image", ns[1], image(ns[1], H, W + 1, "rgb8",
                                                               np.zeros((H, W + 1, 3), np.uint8)))]
    with pytest.raises(FormatError, match=r"topic /cam message 1: has shape \(6, 9, 3\); the topic's first"):
        read_bag(write_bag(tmp_path / "a", bad_size))
    back = [("/j", "sensor_msgs/msg/JointState", ns[i], T["sensor_msgs/msg/JointState"](
        header=header(T0 - i * MS), name=["a"], position=np.array([1.0]), velocity=np.zeros(0), effort=np.zeros(0)))
        for i in range(2)]
    bag = write_bag(tmp_path / "b", back)
    with pytest.raises(FormatError, match=r"topic /j message 1: header.stamp .* before .*stamp='log'"):
        read_bag(bag)
    np.testing.assert_array_equal(read_bag(bag, stamp="log")["j"].t_ns, ns)
    with pytest.raises(ValueError, match="stamp must be one of"):
        read_bag(bag, stamp="sensor")
